package policy

import (
	"fmt"
	"strings"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// ConfigKeysText lists the config keys, aliases paired: "attempts,
// initial_delay (initialDelay), ...".
func ConfigKeysText() string {
	var parts []string
	for i := 0; i < len(ConfigKeys); i++ {
		k := ConfigKeys[i]
		if i+1 < len(ConfigKeys) && ConfigKeys[i+1].Field == k.Field {
			parts = append(parts, k.Name+" ("+ConfigKeys[i+1].Name+")")
			i++
			continue
		}
		parts = append(parts, k.Name)
	}
	return cli.Wrap(strings.Join(parts, ", "), 72, "        ")
}

// optionIndent is where an option's description begins in the manuals.
const optionIndent = "                             "

// OptionText wraps s to the option descriptions' column of the manuals, so
// that a list that grows (shapes, profiles) keeps within 80 columns.
func OptionText(s string) string {
	return cli.Wrap(s, 80-len(optionIndent), optionIndent)
}

// ProfileText is the description of --profile: the profiles' names.
func ProfileText() string {
	return OptionText("start from a profile: " + strings.Join(retry.ProfileNames(), ", "))
}

// BackoffFlagsText is the part of the manuals that lists the flags of the
// backoff, --attempts to --jitter-shape: the same for every verb.
func BackoffFlagsText() string {
	return fmt.Sprintf(backoffFlagsHelp, OptionText(cli.ShapeList()))
}

const backoffFlagsHelp = `    --attempts N             attempts in all, the first included (default 5)
    --initial-delay DURATION wait before the first retry, before jitter
                             (default 1s)
    --max-delay DURATION     cap on any single wait (default 60s)
    --exp-base B             growth factor of the waits (default 2)
    --jitter DURATION        upper bound of the random extra per wait; 0 for
                             none (default 1s)
    --jitter-shape SHAPE     %s
                             (default google)`
