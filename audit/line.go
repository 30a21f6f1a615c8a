package audit

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// line is one audit record, marshalled as one JSON object. Field names are
// part of the format operators parse (docs/audit.md): add, never rename.
type line struct {
	Time              string     `json:"time"`
	Pod               string     `json:"pod,omitempty"`
	Namespace         string     `json:"namespace,omitempty"`
	Client            string     `json:"client,omitempty"`
	Principal         string     `json:"principal,omitempty"`
	UpstreamPrincipal string     `json:"upstream_principal,omitempty"`
	ClientID          string     `json:"client_id,omitempty"`
	API               string     `json:"api"`
	Version           int16      `json:"version"`
	ValidateOnly      bool       `json:"validate_only,omitempty"`
	Outcome           string     `json:"outcome"`
	Error             string     `json:"error,omitempty"`   // the request-level error code, if any
	Rule              string     `json:"rule,omitempty"`    // the rule that refused the whole request
	Message           string     `json:"message,omitempty"` // why it was refused, or the broker's request-level message
	Resources         []resource `json:"resources,omitempty"`
	ResourcesOmitted  int        `json:"resources_omitted,omitempty"`
}

// resource is one thing a request acts on: a topic, a config resource, an
// ACL, a user's credential, a quota entity, a group. Only the fields its
// API carries are set; the rest are left out of the JSON.
type resource struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	ID   string `json:"id,omitempty"` // a topic id, as kafka-topics prints it

	Group string `json:"group,omitempty"`

	// ACLs and ACL filters: in a filter a field left out matches any.
	ResourceType string `json:"resource_type,omitempty"`
	Pattern      string `json:"pattern,omitempty"`
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`

	Mechanism string             `json:"mechanism,omitempty"`
	Op        string             `json:"op,omitempty"` // upsert or delete, for a credential
	Entity    map[string]*string `json:"entity,omitempty"`

	NumPartitions     int32             `json:"num_partitions,omitempty"`
	ReplicationFactor int16             `json:"replication_factor,omitempty"`
	Count             int32             `json:"count,omitempty"`
	Partitions        []int32           `json:"partitions,omitempty"`
	Replicas          map[int32][]int32 `json:"replicas,omitempty"`
	Offsets           map[int32]int64   `json:"offsets,omitempty"`
	Dir               string            `json:"dir,omitempty"`
	Election          string            `json:"election,omitempty"`

	Configs map[string]*string `json:"configs,omitempty"`
	Ops     map[string]string  `json:"ops,omitempty"`

	Level       *int16   `json:"max_version_level,omitempty"`
	UpgradeType string   `json:"upgrade_type,omitempty"`
	Renewers    []string `json:"renewers,omitempty"`
	Endpoints   []string `json:"endpoints,omitempty"`

	// Omitted counts the items of this resource's lists (partitions,
	// configs, replicas) left off to keep the line bounded.
	Omitted int `json:"omitted,omitempty"`
	// Deleted is how many ACLs a DeleteAcls filter removed.
	Deleted int `json:"deleted,omitempty"`

	Outcome string `json:"outcome,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message,omitempty"`

	key     rkey // what Settle matches the response's entries by
	refused bool // kproxy refused it: Settle leaves its outcome alone
}

// Line outcomes.
const (
	outcomeOK      = "ok"      // every resource NONE
	outcomePartial = "partial" // some NONE, some not
	outcomeError   = "error"   // none NONE
	outcomeRefused = "refused" // kproxy answered the whole request itself
	outcomeUnknown = "unknown" // the connection closed before the answer
)

// codeName is a Kafka error code as Kafka spells it (POLICY_VIOLATION),
// NONE for 0, so that lines can be grepped for the broker's own words.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return "UNKNOWN_CODE_" + strconv.Itoa(int(code))
}
