package audit

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file describes the ACL, SCRAM and delegation-token APIs. What
// authenticates (salts, salted passwords, token HMACs) is never read.

// lower is an enum's name as the line spells it (TOPIC -> topic).
func lower(s interface{ String() string }) string { return strings.ToLower(s.String()) }

func createACLs(b *builder, req *kmsg.CreateACLsRequest) {
	b.expect(len(req.Creations))
	for i := range req.Creations {
		c := &req.Creations[i]
		r := b.add("acl")
		if r == nil {
			continue
		}
		r.ResourceType, r.Name, r.Pattern = lower(c.ResourceType), b.str(c.ResourceName), lower(c.ResourcePatternType)
		r.Principal, r.Host = b.str(c.Principal), b.str(c.Host)
		r.Operation, r.Permission = lower(c.Operation), lower(c.PermissionType)
	}
}

// deleteACLs records each filter; its null fields (any) are left out.
func deleteACLs(b *builder, req *kmsg.DeleteACLsRequest) {
	b.expect(len(req.Filters))
	for i := range req.Filters {
		f := &req.Filters[i]
		r := b.add("acl_filter")
		if r == nil {
			continue
		}
		r.ResourceType, r.Pattern = lower(f.ResourceType), lower(f.ResourcePatternType)
		r.Operation, r.Permission = lower(f.Operation), lower(f.PermissionType)
		if f.ResourceName != nil {
			r.Name = b.str(*f.ResourceName)
		}
		if f.Principal != nil {
			r.Principal = b.str(*f.Principal)
		}
		if f.Host != nil {
			r.Host = b.str(*f.Host)
		}
	}
}

// settleDeleteACLs takes each filter's code and counts the ACLs it
// removed.
func settleDeleteACLs(s *settler, resp *kmsg.DeleteACLsResponse) {
	for i := range resp.Results {
		res := &resp.Results[i]
		s.at(i, res.ErrorCode, res.ErrorMessage)
		if i >= s.b.described || s.ln.Resources[i].refused {
			continue
		}
		for _, m := range res.MatchingACLs {
			if m.ErrorCode == 0 {
				s.ln.Resources[i].Deleted++
			}
		}
	}
}

// scramMechanism names a SCRAM mechanism as Kafka does.
func scramMechanism(m int8) string {
	switch m {
	case 1:
		return "SCRAM-SHA-256"
	case 2:
		return "SCRAM-SHA-512"
	}
	return "mechanism_" + strconv.Itoa(int(m))
}

// alterSCRAM records each user's deletion or upsertion by name and
// mechanism only: the salt and salted password are never read.
func alterSCRAM(b *builder, req *kmsg.AlterUserSCRAMCredentialsRequest) {
	b.expect(len(req.Deletions) + len(req.Upsertions))
	for i := range req.Deletions {
		d := &req.Deletions[i]
		if r := b.named("user", d.Name); r != nil {
			r.Op, r.Mechanism = "delete", scramMechanism(d.Mechanism)
		}
	}
	for i := range req.Upsertions {
		u := &req.Upsertions[i]
		if r := b.named("user", u.Name); r != nil {
			r.Op, r.Mechanism = "upsert", scramMechanism(u.Mechanism)
		}
	}
}

// createToken records the owner (v3+, when not the requester) and the
// renewers; the token's id comes from the response.
func createToken(b *builder, req *kmsg.CreateDelegationTokenRequest) {
	r := b.add("delegation_token")
	if r == nil {
		return
	}
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil && *req.OwnerPrincipalType != "" {
			typ = *req.OwnerPrincipalType
		}
		r.Principal = b.str(typ + ":" + *req.OwnerPrincipalName)
	}
	for n := range req.Renewers {
		rn := &req.Renewers[n]
		if b.keep(r, n, 16) {
			r.Renewers = append(r.Renewers, b.str(rn.PrincipalType+":"+rn.PrincipalName))
		}
	}
}

// settleCreateToken takes the code and names the token by its id, which
// identifies it (kafka-delegation-tokens prints it); the HMAC, the
// token's secret, is not read.
func settleCreateToken(s *settler, resp *kmsg.CreateDelegationTokenResponse) {
	s.all(resp.ErrorCode, nil)
	if resp.ErrorCode != 0 || resp.TokenID == "" {
		return
	}
	for i := range s.b.described {
		if r := &s.ln.Resources[i]; r.Type == "delegation_token" && !r.refused {
			r.Name = s.b.str(resp.TokenID)
			if r.Principal == "" && resp.PrincipalName != "" {
				r.Principal = s.b.str(resp.PrincipalType + ":" + resp.PrincipalName)
			}
		}
	}
}
