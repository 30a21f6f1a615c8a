package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/policy"
)

// reloadPoll is how often the config file is checked for changes. Polling
// the content sees a Kubernetes ConfigMap update, which swaps a symlink
// rather than writing the file.
const reloadPoll = 2 * time.Second

// watchConfig sets up reloading of the policies on SIGHUP and whenever the
// content of the file at path differs from loaded (the digest of what
// kproxy started with), and returns the loop that does it until stop
// closes. load reads the file with the command line's flags applied. An
// invalid file is refused and the rules in force stay. The SIGHUP handler
// and the counter are in place when watchConfig returns, so a SIGHUP sent
// as soon as kproxy is up reloads rather than kills it.
func (s *service) watchConfig(path string, loaded []byte, load func() (config.File, *yaml.Node, error)) (loop func(stop <-chan struct{})) {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_config_reloads_total",
		Help: "Config reloads, by result (ok, invalid)."}, []string{"result"})
	for _, r := range []string{"ok", "invalid"} {
		reloads.WithLabelValues(r) // both at 0 before the first reload
	}
	s.reg.MustRegister(reloads)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return func(stop <-chan struct{}) {
		defer signal.Stop(hup)
		s.reloadLoop(path, loaded, load, hup, reloads, stop)
	}
}

// reloadLoop is watchConfig's loop.
func (s *service) reloadLoop(path string, last []byte, load func() (config.File, *yaml.Node, error),
	hup <-chan os.Signal, reloads *prometheus.CounterVec, stop <-chan struct{}) {
	tick := time.NewTicker(reloadPoll)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-hup:
			s.log.Info().Str("config", path).Msg("SIGHUP: reloading")
		case <-tick.C:
			d := digest(path)
			if d == nil || bytes.Equal(d, last) {
				continue
			}
			s.log.Info().Str("config", path).Msg("config file changed: reloading")
		}
		last = digest(path)
		f, root, err := load()
		if err == nil {
			err = f.Validate(path, root)
		}
		if err != nil {
			reloads.WithLabelValues("invalid").Inc()
			s.log.Error().Err(err).Msg("new config refused; the rules in force stay")
			continue
		}
		s.proxy.SetPolicies(policy.New(f.Policies, s.pm))
		reloads.WithLabelValues("ok").Inc()
		s.log.Info().Int("rules", len(f.Policies.Rules)).Msg("policies reloaded")
		if !sameExceptPolicies(f, s.cfg) {
			s.log.Warn().Msg("only the policies section applies live; restart kproxy for the other changes")
		}
	}
}

func digest(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	d := sha256.Sum256(b)
	return d[:]
}

func sameExceptPolicies(a, b config.File) bool {
	a.Policies, b.Policies = policy.Config{}, policy.Config{}
	return reflect.DeepEqual(a, b)
}
