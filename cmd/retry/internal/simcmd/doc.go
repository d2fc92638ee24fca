// Package simcmd is "retry sim": the front end of the strategy simulator
// (package github.com/backoffkit/retry/sim) and of the fleet harness
// (redisretry/fleetsim). Each experiment (contention, overload, fleet) is
// a simExperiment with its own flags and usage text; a new one registers
// itself with registerSimExperiment.
package simcmd
