//! [`board_platform!`](crate::board_platform): the items every board crate exports, generated
//! from its row of the [`board`](crate::board) table so the crates cannot drift apart.

/// Generates a board crate's public items from its [`BoardFacts`](crate::BoardFacts) constant
/// in [`board`](crate::board):
///
/// - `FACTS`, an alias of the table row;
/// - the platform type (a unit struct) implementing [`Platform`](crate::Platform)
///   (`NAME` and `GPU_DIRECT` from the row) and [`PlatformExt`](crate::PlatformExt)
///   (`board()` = `FACTS`, `describe()`);
/// - `nic_ports()` (the board's NIC ports with the running system's netdev names) and
///   `describe()` (a multi-line summary: the facts and what the system shows);
/// - with `tests`, a `tests` module checking that the constants come from the table and
///   that `describe()` names the board, its isolated cores and its first NIC port.
///
/// ```ignore
/// rtdaq_platform::board_platform! {
///     /// The NVIDIA IGX Orin.
///     IgxOrinPlatform = IGX_ORIN;
///     /// [`GpuDirect::DmaBuf`]: the NIC writes `device` memory ...
///     gpu_direct;
///     tests
/// }
/// ```
#[macro_export]
macro_rules! board_platform {
    (
        $(#[$ty_doc:meta])*
        $ty:ident = $row:ident;
        $(#[$gd_doc:meta])*
        gpu_direct;
        $($tests:ident)?
    ) => {
        #[doc = concat!("The board's facts (an alias of [`rtdaq_platform::board::", stringify!($row), "`]).")]
        pub const FACTS: &$crate::BoardFacts = &$crate::board::$row;

        $(#[$ty_doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $ty;

        impl $crate::Platform for $ty {
            const NAME: &'static str = FACTS.name;

            $(#[$gd_doc])*
            const GPU_DIRECT: $crate::GpuDirect = FACTS.gpu_direct;
        }

        impl $crate::PlatformExt for $ty {
            fn board() -> Option<&'static $crate::BoardFacts> {
                Some(FACTS)
            }

            fn describe() -> String {
                describe()
            }
        }

        /// The board's NIC ports with the netdev names of the running system (see
        /// [`BoardFacts::nic_ports`](rtdaq_platform::BoardFacts::nic_ports)).
        pub fn nic_ports() -> Vec<$crate::NicPort> {
            FACTS.nic_ports(::std::path::Path::new("/"))
        }

        /// A short multi-line summary: the board's facts and what the running system shows.
        pub fn describe() -> String {
            $crate::board::describe_at(FACTS, ::std::path::Path::new("/"))
        }

        $($crate::board_platform!(@$tests $ty);)?
    };
    (@tests $ty:ident) => {
        #[cfg(test)]
        mod board_platform_tests {
            use super::*;
            use $crate::{Platform, PlatformExt};

            #[test]
            fn constants_come_from_the_board_table() {
                assert_eq!(<$ty as Platform>::NAME, FACTS.name);
                assert_eq!(<$ty as Platform>::GPU_DIRECT, FACTS.gpu_direct);
                assert_eq!(<$ty as PlatformExt>::board(), Some(FACTS));
                assert_eq!($crate::board::by_name(FACTS.name), Some(FACTS));
            }

            #[test]
            fn describes_itself() {
                let d = describe();
                let head = format!("platform: {} ({}", FACTS.name, FACTS.title);
                assert!(d.starts_with(&head), "{d}");
                assert!(d.contains(&FACTS.isolated_cpulist()), "{d}");
                assert!(
                    d.contains(FACTS.nics[0].netdev) || d.contains(FACTS.nics[0].pci),
                    "{d}"
                );
                assert_eq!(nic_ports().len(), FACTS.nics.len());
                assert_eq!(<$ty as PlatformExt>::describe(), d);
            }
        }
    };
}
