//! The XDP program that steers UDP 4791 into AF_XDP sockets (not written yet).
