//! AF_PACKET engine (work in progress).
