//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proc

import (
	"os"
)

// IsTerminal reports whether w is a character device (a console here).
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// TerminalRows: the size of a console is not read here (0: unknown).
func TerminalRows(any) int { return 0 }
