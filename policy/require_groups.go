// This file holds the conditions on how consumers join groups: group_id
// and session_timeout_ms. They judge the whole request, refused with
// INVALID_GROUP_ID or INVALID_SESSION_TIMEOUT as a broker refuses a
// group id it will not take or a timeout outside its
// group.min/max.session.timeout.ms.

package policy

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (ru *rule) requireJoinGroup(q *kmsg.JoinGroupRequest, j *judgement) {
	if ru.requireGroupID(q.Group, j); j.broken() {
		return
	}
	if text := ru.Require.SessionTimeoutMs.judge(condSessionTimeout, int64(q.SessionTimeoutMillis)); text != "" {
		j.code, j.condition, j.message = codeInvalidSessionTimeout, condSessionTimeout, ru.message(text)
	}
}

func (ru *rule) requireGroupID(group string, j *judgement) {
	if ru.Require.GroupID != "" && !ru.groupID.match(group) {
		j.code, j.condition = codeInvalidGroupID, condGroupID
		j.message = ru.message("group_id " + strconv.Quote(group) + " does not match " + strconv.Quote(ru.Require.GroupID))
	}
}
