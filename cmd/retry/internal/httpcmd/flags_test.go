package httpcmd

import (
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// TestFlagMessagesUseUsersDashes: the flag package's errors name one-letter
// flags with one dash and long flags with two, an unknown flag as typed,
// and never quote the value of a flag that may hold a secret.
func TestFlagMessagesUseUsersDashes(t *testing.T) {
	fs := newHTTPFlags().fs
	for _, tc := range []struct {
		in   string
		args []string
		want string
	}{
		{"flag provided but not defined: -nope", []string{"--nope"}, "flag provided but not defined: --nope"},
		{"flag provided but not defined: -nope", []string{"-nope=1"}, "flag provided but not defined: -nope"},
		{"flag provided but not defined: -y", []string{"x", "-y"}, "flag provided but not defined: -y"},
		{`invalid value "x" for flag -H: want 'Name: value'`, []string{"-H", "x"}, `invalid value for flag -H: want 'Name: value'`},
		{`invalid value "x" for flag -max-time: bad`, []string{"-max-time", "x"}, `invalid value "x" for flag --max-time: bad`},
		{`invalid value "http://u:pw@h/?key=k" for flag -max-time: bad`, nil, `invalid value "http://REDACTED@h/?key=REDACTED" for flag --max-time: bad`},
		{`invalid value "a\"b" for flag -max-time: bad`, nil, `invalid value "a\"b" for flag --max-time: bad`},
		{"flag needs an argument: -o", []string{"-o"}, "flag needs an argument: -o"},
		{"flag needs an argument: -attempts", []string{"-attempts"}, "flag needs an argument: --attempts"},
		{`invalid boolean value "maybe" for -quiet: parse error`, []string{"-quiet=maybe"}, `invalid boolean value "maybe" for --quiet: want true or false`},
	} {
		if got := cli.FlagMessage(tc.in, fs, tc.args); got != tc.want {
			t.Errorf("flagMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
