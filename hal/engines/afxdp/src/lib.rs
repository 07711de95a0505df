//! AF_XDP engine (work in progress).
