// Package audit keeps a trail of every request that changes cluster state
// (topics, configs, ACLs, quotas, credentials, partitions, groups' offsets
// and the rest of ChangesCluster's list), and of every request kproxy
// refuses, as one JSON line per request written once its outcome is
// known. It exists so that who changed what, through this sidecar, and
// whether the broker or kproxy said no, can be answered after the fact
// without broker-side logging.
//
// It owns the `audit:` section of kproxy.yaml (Config), the description of
// each request as a bounded list of resources with secrets redacted
// (Begin, BeginRefusal), the mapping of the broker's per-resource error
// codes back onto them (Pending.Settle) and one writer goroutine per Log
// that keeps a slow or failing output from ever holding up a request: a
// line that cannot be queued or written is dropped and counted.
//
// It does not decode frames: the relay hands it the kmsg request and
// response it decoded anyway. Per request, the relay asks Audits (to skip
// decoding for nothing), calls Begin (or BeginRefusal for a policy
// refusal of any API), Refuse for each resource a policy refused, and
// finishes with Settle (the answer as the client gets it), Refused (kproxy
// answered for the broker) or Unknown (the connection closed first). A
// Pending never finished writes nothing. docs/audit.md is the operator's
// reference.
package audit
