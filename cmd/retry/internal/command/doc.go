// Package command is retry's default mode, "retry [flags] -- COMMAND":
// it runs COMMAND and runs it again while it fails, with the attempts,
// deadlines and signals of timeout(1) (package proc does the process
// control). Its manual is commandHelp, beside Run.
package command
