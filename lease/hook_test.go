package lease

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scriptHook watches the lease scripts a client runs: it counts them and,
// while blocked, holds every renew call until the call's context ends (a
// Redis that hangs, from the caller's point of view).
type scriptHook struct {
	mu      sync.Mutex
	calls   map[string]int // script name -> calls that returned
	blocked chan struct{}  // non-nil: renew calls wait on it
	delay   func()         // non-nil: run before each renew call
	// acquireReply, when non-nil, runs after each acquire call (or pipeline
	// of them) has its reply: a reply that arrives late.
	acquireReply func()
	// pipelines counts pipelines that carried renew scripts.
	pipelines int
}

func newScriptHook() *scriptHook { return &scriptHook{calls: map[string]int{}} }

func scriptName(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	verb, _ := args[0].(string)
	body, _ := args[1].(string)
	verb = strings.ToLower(verb)
	if verb != "evalsha" && verb != "eval" {
		return ""
	}
	switch body {
	case acquireScript.Hash(), acquireScript.Source():
		return "acquire"
	case renewScript.Hash(), renewScript.Source():
		return "renew"
	case releaseScript.Hash(), releaseScript.Source():
		return "release"
	}
	return ""
}

func (h *scriptHook) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[name]
}

// block makes renew calls hang until unblock is called or their context
// ends.
func (h *scriptHook) block() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blocked = make(chan struct{})
}

// unblock lets held and later renew calls through.
func (h *scriptHook) unblock() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.blocked != nil {
		close(h.blocked)
		h.blocked = nil
	}
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := scriptName(cmd)
		if err := h.hold(ctx, name); err != nil {
			return err
		}
		err := next(ctx, cmd)
		h.record(name, err)
		if name == "acquire" {
			h.lateAcquireReply()
		}
		return err
	}
}

func (h *scriptHook) lateAcquireReply() {
	h.mu.Lock()
	late := h.acquireReply
	h.mu.Unlock()
	if late != nil {
		late()
	}
}

// ProcessPipelineHook treats a pipeline holding renew scripts as one renew
// call (blocked or delayed once) and counts each script in it.
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		renews, acquires := 0, 0
		for _, cmd := range cmds {
			switch scriptName(cmd) {
			case "renew":
				renews++
			case "acquire":
				acquires++
			}
		}
		if renews > 0 {
			if err := h.hold(ctx, "renew"); err != nil {
				return err
			}
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.record(scriptName(cmd), cmd.Err())
		}
		if renews > 0 {
			h.mu.Lock()
			h.pipelines++
			h.mu.Unlock()
		}
		if acquires > 0 {
			h.lateAcquireReply()
		}
		return err
	}
}

// hold blocks or delays a renew call as the test asked.
func (h *scriptHook) hold(ctx context.Context, name string) error {
	if name != "renew" {
		return nil
	}
	h.mu.Lock()
	blocked, delay := h.blocked, h.delay
	h.mu.Unlock()
	if blocked != nil {
		select {
		case <-blocked:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if delay != nil {
		delay()
	}
	return nil
}

// record counts a script call that returned. A NOSCRIPT reply is followed
// by EVAL or SCRIPT LOAD and a retry: count the call once.
func (h *scriptHook) record(name string, err error) {
	if name == "" || (err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")) {
		return
	}
	h.mu.Lock()
	h.calls[name]++
	h.mu.Unlock()
}

func (h *scriptHook) pipelineCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pipelines
}
