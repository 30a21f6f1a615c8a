package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestUpdateFeatures(t *testing.T) {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 1}, {Feature: "kraft.version", MaxVersionLevel: 0, UpgradeType: 3}}
	t.Run("v1 per feature", func(t *testing.T) {
		h := newHarness(t, Defaults())
		r := wire(t, req, 1)
		p := h.log.Begin(testConn, r.Key(), 1, r)
		resp := kmsg.NewPtrUpdateFeaturesResponse()
		resp.Results = []kmsg.UpdateFeaturesResponseResult{{Feature: "metadata.version"}, {Feature: "kraft.version", ErrorCode: kerr.InvalidUpdateVersion.Code}}
		p.Settle(wireResp(t, resp, 1))
		rs := resources(t, h.one())
		wantFields(t, "mv", rs[0], map[string]string{"type": "feature", "name": "metadata.version", "max_version_level": "21", "upgrade_type": "upgrade", "outcome": "NONE"})
		// Level 0 removes a feature: it is written, not left out.
		wantFields(t, "kv", rs[1], map[string]string{"max_version_level": "0", "upgrade_type": "unsafe_downgrade", "outcome": "INVALID_UPDATE_VERSION"})
	})
	t.Run("v2 request-level", func(t *testing.T) {
		h := newHarness(t, Defaults())
		r := wire(t, req, 2)
		p := h.log.Begin(testConn, r.Key(), 2, r)
		p.Settle(wireResp(t, kmsg.NewPtrUpdateFeaturesResponse(), 2))
		ln := h.one()
		wantFields(t, "line", ln, map[string]string{"outcome": "ok"})
		for _, r := range resources(t, ln) {
			wantFields(t, "feature", r, map[string]string{"outcome": "NONE"})
		}
	})
}

func TestBrokersAndVoters(t *testing.T) {
	h := newHarness(t, Defaults())
	ub := kmsg.NewPtrUnregisterBrokerRequest()
	ub.BrokerID = 7
	ub = wire(t, ub, 0)
	p := h.log.Begin(testConn, ub.Key(), 0, ub)
	ubr := kmsg.NewPtrUnregisterBrokerResponse()
	ubr.ErrorCode = kerr.BrokerIDNotRegistered.Code
	p.Settle(wireResp(t, ubr, 0))

	av := kmsg.NewPtrAddRaftVoterRequest()
	av.VoterID, av.VoterDirectoryID = 3, [16]byte{0xff}
	av.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: "c3.kafka", Port: 9093}}
	av = wire(t, av, 0)
	h.log.Begin(testConn, av.Key(), 0, av).Settle(wireResp(t, kmsg.NewPtrAddRaftVoterResponse(), 0))

	ls := h.lines()
	if len(ls) != 2 {
		t.Fatalf("%d lines", len(ls))
	}
	wantFields(t, "unregister", resources(t, ls[0])[0], map[string]string{"type": "broker", "name": "7", "outcome": "BROKER_ID_NOT_REGISTERED"})
	wantFields(t, "voter", resources(t, ls[1])[0], map[string]string{"type": "voter", "name": "3", "id": "_wAAAAAAAAAAAAAAAAAAAA",
		"endpoints": `["CONTROLLER://c3.kafka:9093"]`, "outcome": "NONE"})
}
