"""The vm backend: scenarios on a stock Linux kernel in a QEMU guest, in virtual time (docs/vm.md)."""
