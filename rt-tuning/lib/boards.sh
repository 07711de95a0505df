# shellcheck shell=bash disable=SC2034  # BOARD_* are read by tune.sh and lib/items.sh
# rt-tuning/lib/boards.sh: tuning defaults per board. Sourced, not run.
#
# board_defaults BOARD sets:
#   BOARD_CPUS         CPUs of the board ("" = read the host's online CPUs)
#   BOARD_HOUSEKEEPING CPUs for the OS, IRQs and the service's non-RT threads
#   BOARD_ISOLATED     CPUs to isolate for queue threads (the config's queue cores are added)
#   BOARD_GPU          discrete | integrated | none | unknown  (GPU clocks are set on discrete)
#   BOARD_ARCH         aarch64 | "" (host: this machine's `uname -m`) — picks the idle parameter
#
# Core counts are the config crate's (configs/schema/src/model/mod.rs, Platform::cpu_count:
# IGX Orin 12, IGX Thor 14, DGX Spark 20). The split keeps CPUs 0-1 for housekeeping on every
# board and isolates the rest; the board crates (platform/<board>, issue 7) are the reference
# for the board topology — keep this table in step with them.
board_defaults() {
    BOARD_ARCH=aarch64
    case $1 in
    host)
        BOARD_CPUS="" BOARD_HOUSEKEEPING="" BOARD_ISOLATED="" BOARD_GPU=unknown BOARD_ARCH="" ;;
    igx-orin)
        # 12 Cortex-A78AE; discrete RTX GPU when fitted (iGPU otherwise)
        BOARD_CPUS=0-11 BOARD_HOUSEKEEPING=0-1 BOARD_ISOLATED=2-11 BOARD_GPU=discrete ;;
    igx-thor)
        # 14 Neoverse-V3AE; Blackwell iGPU, optional discrete GPU
        BOARD_CPUS=0-13 BOARD_HOUSEKEEPING=0-1 BOARD_ISOLATED=2-13 BOARD_GPU=integrated ;;
    dgx-spark)
        # 20 Arm cores (10 X925 + 10 A725), GB10 unified memory
        BOARD_CPUS=0-19 BOARD_HOUSEKEEPING=0-1 BOARD_ISOLATED=2-19 BOARD_GPU=integrated ;;
    *)
        echo "tune.sh: unknown platform '$1' (host, igx-orin, igx-thor, dgx-spark)" >&2
        return 2 ;;
    esac
}
