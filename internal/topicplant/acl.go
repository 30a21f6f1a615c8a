package topicplant

import "github.com/twmb/franz-go/pkg/kmsg"

// ACLBinding is a CreateAcls v3 allowing User:x everything on one
// resource: the policy and proxy tests of topic rules on ACLs.
func ACLBinding(typ kmsg.ACLResourceType, name string, pattern kmsg.ACLResourcePatternType) *kmsg.CreateACLsRequest {
	r := kmsg.NewPtrCreateACLsRequest()
	r.Version = 3
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, pattern
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
	r.Creations = append(r.Creations, c)
	return r
}

// ACLFilter is a DeleteAcls v3 of one filter (any principal, operation and
// permission) on the resources typ, name and pattern select.
func ACLFilter(typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType) *kmsg.DeleteACLsRequest {
	r := kmsg.NewPtrDeleteACLsRequest()
	r.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = typ, name, pattern
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	r.Filters = append(r.Filters, f)
	return r
}
