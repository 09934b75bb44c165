package redislease

import (
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/lease/internal/testhooks"
)

func init() {
	testhooks.RedisIdle = func(b any) bool { return b.(*Backend).auto.Idle() }
	testhooks.RedisScripts = func() (acquire, renew, release *luascript.Script) {
		return acquireScript, renewScript, releaseScript
	}
}
