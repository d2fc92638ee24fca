package redisretry_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/redisretry"
)

// Every process of a deployment runs this: one quota, one retry budget and
// one cooldown for the whole fleet. (It needs a Redis server on
// 127.0.0.1:6379; the limiters decide locally when there is none.)
func Example() {
	client, err := redisretry.NewClient("redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	key := "myproject:gemini-2.5-flash:us-central1"
	quota, err := redisretry.NewQuota(client, redisretry.QuotaConfig{Settings: redisretry.Settings{Key: key}, Limit: redisretry.PerMinute(600)})
	if err != nil {
		log.Fatal(err)
	}
	defer quota.Close()
	budget, err := redisretry.NewBudget(client, redisretry.BudgetConfig{Settings: redisretry.Settings{Key: key}})
	if err != nil {
		log.Fatal(err)
	}
	defer budget.Close()
	cooldown, err := redisretry.NewCooldown(client, redisretry.CooldownConfig{Settings: redisretry.Settings{Key: key}})
	if err != nil {
		log.Fatal(err)
	}
	defer cooldown.Close()

	p := retry.Policy{
		Pacer:  retry.Pacers(cooldown, quota), // the cooldown takes nothing: first
		Budget: budget,
	}
	httpClient, err := httpretry.NewClient(p)
	if err != nil {
		log.Fatal(err)
	}
	_ = httpClient // genai.NewClient(ctx, &genai.ClientConfig{HTTPClient: httpClient})
}

func ExampleQuota_Wait() {
	client, _ := redisretry.NewClient("redis://127.0.0.1:6379/0")
	defer client.Close()
	quota, err := redisretry.NewQuota(client, redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "batch-job"}, Limit: redisretry.PerSecond(40)})
	if err != nil {
		log.Fatal(err)
	}
	defer quota.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		// Wait returns at once with an error wrapping retry.ErrPastDeadline
		// when the quota has no slot before ctx's deadline.
		if err := quota.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("request", i)
	}
}

// A tokens-per-minute quota: each request is charged its estimated tokens.
func ExampleWithCost() {
	client, _ := redisretry.NewClient("redis://127.0.0.1:6379/0")
	defer client.Close()
	tpm, _ := redisretry.NewQuota(client, redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "tpm:gemini"}, Limit: redisretry.PerMinute(1_000_000)})
	defer tpm.Close()
	ctx := redisretry.WithCost(context.Background(), 2500) // e.g. from countTokens
	err := retry.Run(ctx, retry.Policy{Pacer: tpm}, func(ctx context.Context) error {
		return nil // the request
	})
	fmt.Println(err)
}

func ExampleCooldown_Record() {
	client, _ := redisretry.NewClient("redis://127.0.0.1:6379/0")
	defer client.Close()
	cd, _ := redisretry.NewCooldown(client, redisretry.CooldownConfig{Settings: redisretry.Settings{Key: "gemini"}})
	defer cd.Close()
	// The loop calls Record with every attempt's error; a 429 with
	// Retry-After or RetryInfo carries the hint (httpretry attaches it).
	cd.Record(retry.After(fmt.Errorf("429 Too Many Requests"), 25*time.Second))
	fmt.Println(time.Until(cd.Until()).Round(time.Second) <= 25*time.Second)
}

func ExampleParseLimit() {
	l, err := redisretry.ParseLimit("600/1m")
	fmt.Println(l, err, l.Interval(1))
	_, err = redisretry.ParseLimit("600")
	fmt.Println(err)
	// Output:
	// 600/1m0s <nil> 100ms
	// redisretry: invalid rate "600": want COUNT/PERIOD, e.g. 600/1m or 40/1s
}

func ExampleNewClient() {
	_, err := redisretry.NewClient("redis://user:s3cret@host:notaport/0")
	fmt.Println(err != nil)
	_ = http.StatusOK
	// Output: true
}

// A TLS Redis, such as Memorystore with in-transit encryption: its CA from a
// file (or from SSL_CERT_FILE), a dial's bound for the handshake apart from
// each decision's Timeout, and AUTH in the URL.
func ExampleNewClientWith() {
	client, err := redisretry.NewClientWith(redisretry.ClientConfig{
		URL:         "rediss://:AUTH_STRING@10.0.0.3:6378/0",
		DialTimeout: 2 * time.Second,
		CAFile:      "/etc/ssl/memorystore-server-ca.pem",
	})
	fmt.Println(err)
	if client != nil {
		client.Close()
	}
	// Output: redisretry: invalid ClientConfig.CAFile = "/etc/ssl/memorystore-server-ca.pem": open /etc/ssl/memorystore-server-ca.pem: no such file or directory
}

// A Limiter's Admit has no context: a caller that has one (and a deadline)
// bounds a retry's wait for Redis by them with AdmitContext.
func ExampleBudget_AdmitContext() {
	client, _ := redisretry.NewClient("redis://127.0.0.1:6379/0")
	defer client.Close()
	budget, err := redisretry.NewBudget(client, redisretry.BudgetConfig{Settings: redisretry.Settings{Key: "batch-job", Timeout: time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	defer budget.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	// Waits for Redis at most 100ms (not the Timeout of 1s), then decides
	// locally.
	if budget.AdmitContext(ctx, true, deadline) {
		fmt.Println("retry")
	}
}

// Every process of a fleet under a shared capacity with no number (Vertex
// AI's Standard PayGo) runs this: the fleet learns one rate from its 429s,
// at most 100 a second (the CLI's --quota auto:100/1s). (It needs a Redis
// server on 127.0.0.1:6379; without one each process learns on its own.)
func ExampleNewAutoQuota() {
	client, err := redisretry.NewClient("redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	key := "myproject:gemini-2.5-flash:global"
	ceiling, err := redisretry.ParseLimit("100/1s")
	if err != nil {
		log.Fatal(err)
	}
	quota, err := redisretry.NewAutoQuota(client, redisretry.AutoQuotaConfig{Settings: redisretry.Settings{Key: key}, Ceiling: ceiling})
	if err != nil {
		log.Fatal(err)
	}
	defer quota.Close()
	cooldown, err := redisretry.NewCooldown(client, redisretry.CooldownConfig{Settings: redisretry.Settings{Key: key}})
	if err != nil {
		log.Fatal(err)
	}
	defer cooldown.Close()

	httpClient, err := httpretry.NewClient(retry.Policy{Pacer: retry.Pacers(cooldown, quota)})
	if err != nil {
		log.Fatal(err)
	}
	_ = httpClient // genai.NewClient(ctx, &genai.ClientConfig{HTTPClient: httpClient})
}

// A configuration the CLI cannot map onto an AutoQuota is refused before any
// process starts, naming the field and its value.
func ExampleAutoQuotaConfig_Validate() {
	for _, c := range []redisretry.AutoQuotaConfig{
		{Settings: redisretry.Settings{Key: "k"}, Ceiling: redisretry.PerSecond(100)},
		{Settings: redisretry.Settings{Key: "k"}, Ceiling: redisretry.Limit{Rate: 0, Period: time.Second}},
		{Settings: redisretry.Settings{Key: "k"}, Ceiling: redisretry.PerSecond(5), Floor: redisretry.PerSecond(10)},
		{Settings: redisretry.Settings{Key: "k"}, Beta: 1.5},
	} {
		fmt.Println(c.Validate())
	}
	// Output:
	// <nil>
	// redisretry: invalid AutoQuotaConfig.Ceiling.Limit.Rate = 0: must be > 0 (units per Period)
	// redisretry: invalid AutoQuotaConfig.Ceiling = 5/1s: must not be below the Floor (10/1s)
	// redisretry: invalid AutoQuotaConfig.Beta = 1.5: must be above 0 and below 1, the factor of a cut (0 means 0.8)
}
