//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proc

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether w, a reader or a writer, is a terminal (an
// *os.File whose terminal attributes can be read).
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ioctlGetTermios, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// TerminalRows returns the number of lines of the terminal w is, 0 if w is
// no terminal or its size is unknown.
func TerminalRows(w any) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Row)
}
