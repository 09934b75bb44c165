package lease

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover), as redis.Script.Run does.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(acquireSrc)

	//go:embed scripts/renew.lua
	renewSrc    string
	renewScript = redis.NewScript(renewSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)
)
