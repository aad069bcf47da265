// Package submit holds what the GIN backends' GPU-side submit paths
// (gin/gdaki and gin/proxy issuers) share: how a state machine run by a
// group hands the group back when it ends, whether the group has a
// process (a blocking Issue or Wait, which parks it) or not (IssueThen,
// FlushThen, which continue it).
package submit
