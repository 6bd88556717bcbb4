//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// watchKeys puts the terminal on in into non-canonical, no-echo mode (signals such as
// Ctrl-C keep working) and sends each key pressed on keys. ok is false when in is not a
// terminal; then nothing changed. restore puts the terminal back; call it before exiting.
// The reading goroutine ends when in is closed or the process exits.
func watchKeys(in *os.File) (keys <-chan byte, restore func(), ok bool) {
	fd := int(in.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, nil, false
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, nil, false
	}
	ch := make(chan byte, 8)
	go func() {
		buf := make([]byte, 16)
		for {
			n, err := in.Read(buf)
			for _, b := range buf[:n] {
				select {
				case ch <- b:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, true
}
