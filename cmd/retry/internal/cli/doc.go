// Package cli is what every verb of retry shares at the bottom: the exit
// codes, the usage and exit-status errors and the one line they print,
// flag parsing with messages worded for a user (and no secret quoted), the
// parsers of durations and code lists, the version line, and small text
// helpers. It imports no other package of the command.
package cli
