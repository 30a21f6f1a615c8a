package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreateACLsByIndex(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow},
		{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "team-", ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:bob", Host: "10.0.0.1", Operation: kmsg.ACLOperationDescribeConfigs, PermissionType: kmsg.ACLPermissionTypeDeny},
	}
	req = wire(t, req, 3)
	p := h.log.Begin(testConn, req.Key(), 3, req)
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.Results = []kmsg.CreateACLsResponseResult{{ErrorCode: kerr.SecurityDisabled.Code}, {}}
	p.Settle(wireResp(t, resp, 3))
	ln := h.one()
	rs := resources(t, ln)
	wantFields(t, "line", ln, map[string]string{"api": "CreateAcls", "outcome": "partial"})
	wantFields(t, "first", rs[0], map[string]string{"type": "acl", "resource_type": "topic", "name": "orders", "pattern": "literal",
		"principal": "User:alice", "host": "*", "operation": "read", "permission": "allow", "outcome": "SECURITY_DISABLED"})
	wantFields(t, "second", rs[1], map[string]string{"resource_type": "group", "pattern": "prefixed", "operation": "describe_configs",
		"permission": "deny", "outcome": "NONE"})
}

func TestDeleteACLsFilters(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = []kmsg.DeleteACLsRequestFilter{{
		ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeMatch,
		Principal: ptr("User:mallory"), Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny,
	}}
	req = wire(t, req, 2)
	p := h.log.Begin(testConn, req.Key(), 2, req)
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.Results = []kmsg.DeleteACLsResponseResult{{MatchingACLs: []kmsg.DeleteACLsResponseResultMatchingACL{{}, {}, {ErrorCode: kerr.UnknownServerError.Code}}}}
	p.Settle(wireResp(t, resp, 2))
	r := resources(t, h.one())[0]
	wantFields(t, "filter", r, map[string]string{"type": "acl_filter", "resource_type": "any", "pattern": "match", "principal": "User:mallory",
		"name": "", "host": "", "operation": "any", "deleted": "2", "outcome": "NONE"})
}

// A SCRAM upsertion is recorded by user and mechanism: its salt and salted
// password never reach the output.
func TestAlterSCRAMNeverRecordsSecrets(t *testing.T) {
	h := newHarness(t, Defaults())
	salt := []byte("SALT-BYTES-NEVER-LOGGED")
	salted := []byte("SALTED-PASSWORD-NEVER-LOGGED")
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "alice", Mechanism: 2, Iterations: 8192, Salt: salt, SaltedPassword: salted}}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob", Mechanism: 1}}
	req = wire(t, req, 0)
	p := h.log.Begin(testConn, req.Key(), 0, req)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.Results = []kmsg.AlterUserSCRAMCredentialsResponseResult{{User: "alice"}, {User: "bob", ErrorCode: kerr.ResourceNotFound.Code}}
	p.Settle(wireResp(t, resp, 0))
	ln := h.one()
	out := []byte(h.buf.String())
	notIn(t, out, string(salt))
	notIn(t, out, string(salted))
	rs := resources(t, ln)
	wantFields(t, "bob", rs[0], map[string]string{"type": "user", "name": "bob", "op": "delete", "mechanism": "SCRAM-SHA-256", "outcome": "RESOURCE_NOT_FOUND"})
	wantFields(t, "alice", rs[1], map[string]string{"type": "user", "name": "alice", "op": "upsert", "mechanism": "SCRAM-SHA-512", "outcome": "NONE"})
}

// Delegation tokens are recorded by owner, renewers and id, never HMAC.
func TestDelegationTokensNeverRecordHMAC(t *testing.T) {
	h := newHarness(t, Defaults())
	hmac := []byte("HMAC-BYTES-NEVER-LOGGED")

	cr := kmsg.NewPtrCreateDelegationTokenRequest()
	cr.OwnerPrincipalName = ptr("svc-batch")
	cr.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{{PrincipalType: "User", PrincipalName: "ops"}}
	cr = wire(t, cr, 3)
	p := h.log.Begin(testConn, cr.Key(), 3, cr)
	crr := kmsg.NewPtrCreateDelegationTokenResponse()
	crr.TokenID, crr.HMAC, crr.PrincipalType, crr.PrincipalName = "tok-123", hmac, "User", "svc-batch"
	p.Settle(wireResp(t, crr, 3))

	rn := kmsg.NewPtrRenewDelegationTokenRequest()
	rn.HMAC = hmac
	rn = wire(t, rn, 2)
	p = h.log.Begin(testConn, rn.Key(), 2, rn)
	rnr := kmsg.NewPtrRenewDelegationTokenResponse()
	rnr.ErrorCode = kerr.DelegationTokenExpired.Code
	p.Settle(wireResp(t, rnr, 2))

	ex := kmsg.NewPtrExpireDelegationTokenRequest()
	ex.HMAC = hmac
	ex = wire(t, ex, 2)
	h.log.Begin(testConn, ex.Key(), 2, ex).Settle(wireResp(t, kmsg.NewPtrExpireDelegationTokenResponse(), 2))

	ls := h.lines()
	notIn(t, []byte(h.buf.String()), string(hmac))
	if len(ls) != 3 {
		t.Fatalf("%d lines", len(ls))
	}
	wantFields(t, "create", resources(t, ls[0])[0], map[string]string{"type": "delegation_token", "name": "tok-123",
		"principal": "User:svc-batch", "renewers": `["User:ops"]`, "outcome": "NONE"})
	wantFields(t, "renew", ls[1], map[string]string{"api": "RenewDelegationToken", "outcome": "error"})
	wantFields(t, "renew", resources(t, ls[1])[0], map[string]string{"type": "delegation_token", "name": "", "outcome": "DELEGATION_TOKEN_EXPIRED"})
	wantFields(t, "expire", ls[2], map[string]string{"api": "ExpireDelegationToken", "outcome": "ok"})
}
