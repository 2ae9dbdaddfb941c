// Package scheduler runs background jobs (compaction, retention sweeps, snapshot uploads) on a node.
package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"
)

var ErrDraining = errors.New("scheduler: draining, no new jobs accepted")

type Job func(ctx context.Context) error

type Scheduler struct {
	mu       sync.Mutex
	draining bool
	wg       sync.WaitGroup
	jobs     chan Job
}

func New(workers int) *Scheduler {
	s := &Scheduler{jobs: make(chan Job, 128)}
	for i := 0; i < workers; i++ {
		go s.worker()
	}
	return s
}

// Submit queues a job; it fails with ErrDraining once Drain was called.
func (s *Scheduler) Submit(j Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return ErrDraining
	}
	s.wg.Add(1)
	s.jobs <- j
	return nil
}

// Drain stops accepting new jobs and waits for the running and queued ones to finish, or for
// ctx to end. Called on SIGTERM before the ledger is flushed, so that shutdown is graceful.
func (s *Scheduler) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Scheduler) worker() {
	for j := range s.jobs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		_ = j(ctx)
		cancel()
		s.wg.Done()
	}
}
