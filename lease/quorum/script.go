package quorum

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// restart, SCRIPT FLUSH or failover), as redis.Script.Run does. Renewal
// uses redsync's own touch script.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(acquireSrc)

	//go:embed scripts/raise.lua
	raiseSrc    string
	raiseScript = redis.NewScript(raiseSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)
)

// Key suffixes, as in package lease.
const (
	fenceSuffix   = ":fence"
	releaseSuffix = ":released"
)
