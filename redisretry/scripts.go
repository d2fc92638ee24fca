package redisretry

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script runs with EVALSHA (Script.Run falls back to EVAL when the server
// does not know it yet, e.g. after a restart). Their headers say what KEYS,
// ARGV and the reply hold.
var (
	//go:embed lua/gcra.lua
	gcraSource string
	gcraScript = redis.NewScript(gcraSource)

	//go:embed lua/gcra_return.lua
	gcraReturnSource string
	gcraReturnScript = redis.NewScript(gcraReturnSource)

	//go:embed lua/budget.lua
	budgetSource string
	budgetScript = redis.NewScript(budgetSource)

	//go:embed lua/cooldown.lua
	cooldownSource string
	cooldownScript = redis.NewScript(cooldownSource)
)

var (
	//go:embed lua/rate.lua
	rateSource string
	rateScript = redis.NewScript(rateSource)
)
