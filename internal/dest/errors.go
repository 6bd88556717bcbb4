package dest

import "errors"

// ErrInvalid is returned, wrapped with a detail, by Parse and ParseFilter for every
// destination they reject: too long, empty, an empty segment or channel token, a prefix with
// no channel, a control character, a misplaced or forbidden wildcard, a bare destination that
// would be confused with a prefixed one, or a default pattern that may not route bare
// destinations.
//
// Test for it with errors.Is. The wrapped text ("invalid destination: empty segment") is for
// the log only; a client is only ever sent ErrInvalid.Error(), the sanitized text
// "invalid destination" (reference 003, "Destination errors (all sanitized)"). Its text is
// deliberately not prefixed with the package name because it is that wire text.
var ErrInvalid = errors.New("invalid destination")
