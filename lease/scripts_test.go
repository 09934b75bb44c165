package lease

import "github.com/holdfast-go/holdfast/lease/internal/testhooks"

// The Redis backend's scripts, for the script hooks of these tests.
var acquireScript, renewScript, releaseScript = testhooks.RedisScripts()
