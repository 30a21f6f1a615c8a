package audit

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file describes the cluster-wide APIs: features, broker and
// controller registrations, and the KRaft quorum's voters.

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// upgradeType names UpdateFeatures' upgrade type (v1+); v0 has only
// allow_downgrade.
func upgradeType(u *kmsg.UpdateFeaturesRequestFeatureUpdate, version int16) string {
	if version == 0 {
		if u.AllowDowngrade {
			return "downgrade"
		}
		return "upgrade"
	}
	switch u.UpgradeType {
	case 1:
		return "upgrade"
	case 2:
		return "safe_downgrade"
	case 3:
		return "unsafe_downgrade"
	}
	return "upgrade_type_" + strconv.Itoa(int(u.UpgradeType))
}

// updateFeatures records each feature's new level; level 0 removes the
// feature, so it is always written.
func updateFeatures(b *builder, req *kmsg.UpdateFeaturesRequest) {
	b.expect(len(req.FeatureUpdates))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.FeatureUpdates {
		u := &req.FeatureUpdates[i]
		if r := b.named("feature", u.Feature); r != nil {
			level := u.MaxVersionLevel
			r.Level = &level
			r.UpgradeType = upgradeType(u, req.Version)
		}
	}
}

// settleFeatures maps v0-v1's per-feature results; v2+ answers with the
// request-level code only, which then stands for every feature.
func settleFeatures(s *settler, resp *kmsg.UpdateFeaturesResponse) {
	s.top(resp.ErrorCode, resp.ErrorMessage)
	if resp.ErrorCode != 0 {
		return
	}
	if len(resp.Results) == 0 {
		s.all(0, nil)
		return
	}
	for i := range resp.Results {
		e := &resp.Results[i]
		s.key(keyOf("feature", e.Feature), e.ErrorCode, e.ErrorMessage)
	}
}

func addVoter(b *builder, req *kmsg.AddRaftVoterRequest) {
	r := b.named("voter", itoa(req.VoterID))
	if r == nil {
		return
	}
	r.ID = uuid(req.VoterDirectoryID)
	for n := range req.Listeners {
		l := &req.Listeners[n]
		if b.keep(r, n, 16) {
			r.Endpoints = append(r.Endpoints, b.str(l.Name+"://"+net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))))
		}
	}
}
