package retry

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// Network reports whether err is the network's: a timeout, a connection
// refused, reset or closed mid-reply. A service behind such an error may
// answer again: an outage, not a failure. The one list of them, for the
// databases' errors (dialect.Classify) and the lock services'
// (lock.Locker).
func Network(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
