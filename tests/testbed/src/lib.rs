//! Network-namespace test bed (work in progress).
