package store

import (
	"errors"
	"syscall"
)

// IsDiskFault reports whether err comes from a file system that refuses writes for a
// reason that can pass without a restart: no space left (ENOSPC), a quota exceeded
// (EDQUOT) or a read-only file system (EROFS). A store that meets one at start-up comes up
// down (writes refused with the cause) and recovers on its own once writes succeed again,
// like one that meets it while running.
func IsDiskFault(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}
