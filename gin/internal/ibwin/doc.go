// Package ibwin holds the InfiniBand/RoCE memory-registration logic shared by
// the GIN network backends (gdaki and proxy): the model's virtual-address
// assignment for regions, the access rights of window and signal
// registrations, and the per-rank registration of a GIN window
// (ncclCommWindowRegister's regMrSym step).
package ibwin
