// Package clock is the time source of holdfast's scheduler: a wall-clock
// reading and timers, behind a small interface, so that tests can step the
// wall clock backward and forward, freeze a process, and skew replicas.
//
// # Two kinds of time
//
// A Clock has two readings that real machines keep apart. Now is the wall
// clock: what NTP corrects, what an operator sets, what cron specs name.
// Timers measure elapsed (monotonic) time: a timer of 1 s fires after one
// second has passed, whatever the wall clock did meanwhile. A consumer
// detects a wall-clock step by comparing the two: it asked a timer for d,
// and the wall clock moved by less than 0 (stepped back) or by more than d
// plus a tolerance (stepped forward, or the process could not run: SIGSTOP,
// VM suspend, laptop sleep).
//
// A timer either sends on its channel (NewTimer) or calls a function on a
// goroutine of its own (AfterFunc, as time.AfterFunc): the second costs no
// goroutine until it fires, which the scheduler uses for the heartbeats of
// its runs, most of which end first.
//
// # Real and fake
//
// Real reads time.Now and makes time timers, so it follows testing/synctest
// inside a bubble. Fake moves only when told: Advance moves both readings
// (firing the timers that come due, late, at the end: what a frozen process
// sees when it resumes), Step moves the wall reading alone (a clock
// correction). Fake.Waiters and Fake.BlockUntil let a test wait until the
// code under test is parked on its timers, instead of sleeping.
package clock
