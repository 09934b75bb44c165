package election

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT.
var (
	//go:embed scripts/announce.lua
	announceSrc    string
	announceScript = redis.NewScript(announceSrc)

	//go:embed scripts/leader.lua
	leaderSrc    string
	leaderScript = redis.NewScript(leaderSrc)
)
