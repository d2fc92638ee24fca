module github.com/backoffkit/retry/cmd/retry

go 1.26.0

replace (
	github.com/backoffkit/retry => ../../
	github.com/backoffkit/retry/redisretry => ../../redisretry
)

require github.com/backoffkit/retry v0.0.0-00010101000000-000000000000
