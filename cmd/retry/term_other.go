//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"os"
)

// isTerminal reports whether w is a character device (a console here).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminalRows: the size of a console is not read here (0: unknown).
func terminalRows(any) int { return 0 }
