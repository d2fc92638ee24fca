// Package otelretry reports the retries of [retry.Do], [retry.Run] and
// httpretry to OpenTelemetry.
//
// Three pieces, used together or apart:
//
//   - [NewObserver] returns a [retry.Observer] that records metrics
//     (retry.attempts, retry.wait, retry.give_ups) and adds a "retry" event
//     (and a "retry.give_up" event) to the span found in the call's context.
//     Combine it with other observers using [retry.Observers].
//   - [NewTransport] instruments an HTTP client that retries: it starts one
//     client span per attempt and sets http.request.resend_count on every
//     attempt after the first, as the OpenTelemetry HTTP semantic conventions
//     define it.
//   - [NewFleetMetrics] records the state of the fleet limiters of the
//     redisretry module (fallback active, lease refills, quota and cooldown
//     waits, hints) from their Observer's events, adapted in one line (see
//     [FleetEvent]): this module does not depend on redisretry or go-redis.
//
// Error messages put on spans pass through a redactor that removes
// credentials from URLs (user info and the values of the key, access_token,
// token, api_key, sig and signature query parameters), because the errors of
// net/http quote the request's URL. Request and response headers are never
// recorded.
//
// The package lives in its own module so that users of the core never
// download OpenTelemetry.
package otelretry
