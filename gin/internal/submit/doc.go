// Package submit is the driver of the GIN backends' GPU-side submit paths
// (gin/gdaki and gin/proxy issuers): how a state machine run by a group
// steps, names its events, and hands the group back when it ends, whether
// the group has a process (a blocking Issue or Wait, which parks it) or
// not (IssueThen, FlushThen, which continue it).
package submit
