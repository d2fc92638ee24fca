package fleetsim

import (
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// An invalid limiter config is reported with the Config field that holds
// it, ahead of its own message; an unset one (nil) is not checked.
func TestConfigValidatesLimiterConfigs(t *testing.T) {
	base := func() Config {
		return Config{Processes: 2, Duration: time.Second, Demand: Demand{Rate: 1},
			Server: Server{Capacity: []Step{{0, 10}}}}
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("no limiter config: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // the start of the message
	}{
		{"Quota", func(c *Config) { c.Quota = &redisretry.QuotaConfig{Limit: redisretry.PerSecond(1)} },
			"fleetsim: invalid Config.Quota: redisretry: invalid QuotaConfig.Key"},
		{"Auto", func(c *Config) { c.Auto = &redisretry.AutoQuotaConfig{} },
			"fleetsim: invalid Config.Auto: redisretry: invalid AutoQuotaConfig.Key"},
		{"Budget", func(c *Config) { c.Budget = &redisretry.BudgetConfig{} },
			"fleetsim: invalid Config.Budget: redisretry: invalid BudgetConfig.Key"},
		{"Cooldown", func(c *Config) { c.Cooldown = &redisretry.CooldownConfig{} },
			"fleetsim: invalid Config.Cooldown: redisretry: invalid CooldownConfig.Key"},
		{"Budget before Cooldown", func(c *Config) {
			c.Budget, c.Cooldown = &redisretry.BudgetConfig{}, &redisretry.CooldownConfig{}
		}, "fleetsim: invalid Config.Budget:"},
		{"Capacity before Budget", func(c *Config) {
			c.Server.Capacity = append(c.Server.Capacity, Step{0, 10})
			c.Budget = &redisretry.BudgetConfig{}
		}, "fleetsim: invalid Config.Server.Capacity[1].At"},
	}
	for _, tt := range tests {
		c := base()
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error starting %q", tt.name, err, tt.want)
		}
	}
}
