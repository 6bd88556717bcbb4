package admin

// HTTP paths of the monitor API (DESIGN §7). The /titan/monitor/ paths are the ones Titan's
// users already script against; the others are Titan additions beside them.
const (
	// PathHealth answers GET with {"status":"UP", ...}.
	PathHealth = "/titan/monitor/health"
	// PathSnapshot answers GET with a Snapshot.
	PathSnapshot = "/titan/monitor/snapshot"
	// PathQueues answers GET with a QueueList (filters: group, destination, match, filter;
	// paging: offset, limit — default DefaultQueuePageSize, at most MaxQueuePageSize), POST with a
	// CreateQueueResult (destination, group, maxPendingBytes, capacity, ringSize; 201 when
	// created, 200 when it existed) and DELETE with a DeleteQueueResult (destination, group,
	// force).
	PathQueues = "/titan/monitor/queues"
	// PathQueuesPause answers POST (destination, group) with the paused queue's QueueInfo.
	PathQueuesPause = "/titan/monitor/queues/pause"
	// PathQueuesResume answers POST (destination, group) with the resumed queue's QueueInfo.
	PathQueuesResume = "/titan/monitor/queues/resume"
	// PathQueuesRingSize answers POST (destination, group, size) with the queue's QueueInfo.
	PathQueuesRingSize = "/titan/monitor/queues/ring-size"
	// PathConnections answers GET with a ConnectionList and DELETE (id) with a
	// CloseConnectionResult.
	PathConnections = "/titan/monitor/connections"
	// PathSubscriptions answers GET (filters: destination, group) with a SubscriptionList.
	PathSubscriptions = "/titan/monitor/subscriptions"
	// PathLogs answers GET (filters: destination, group) with an EventLogList.
	PathLogs = "/titan/monitor/logs"
	// PathDurableSubscriptions answers GET (filters: destination, group) with a
	// DurableSubscriptionList and DELETE (destination, group, name) with a
	// DeleteDurableResult.
	PathDurableSubscriptions = "/titan/monitor/durable-subscriptions"
	// PathQueuesPurge answers POST (destination, group) with a PurgeResult.
	PathQueuesPurge = "/titan/monitor/queues/purge"
	// PathQueuesMessages answers GET (destination, group, limit) with a BrowseResult.
	PathQueuesMessages = "/titan/monitor/queues/messages"
	// PathQueuesRedrive answers POST (destination, group, limit) with a RedriveResult.
	PathQueuesRedrive = "/titan/monitor/queues/redrive"
	// PathPublish answers POST with a PublishResult; the body is a JSON PublishRequest.
	PathPublish = "/publish"
	// PathMetrics serves Prometheus metrics (text format).
	PathMetrics = "/metrics"
	// PathPprof serves Go's runtime profiles (net/http/pprof's index, named profiles,
	// cmdline, profile, symbol and trace below it) to a holder of the broker-wide manage
	// right.
	PathPprof = "/debug/pprof/"
	// PathConsole serves the web console (GET, exactly "/").
	PathConsole = "/"
)

// Query parameters of the queue endpoints.
const (
	ParamDestination     = "destination"
	ParamGroup           = "group"
	ParamMatch           = "match"
	ParamMaxPendingBytes = "maxPendingBytes"
	ParamCapacity        = "capacity"
	ParamRingSize        = "ringSize"
	ParamSize            = "size"
	ParamForce           = "force"
	ParamID              = "id"
	ParamLimit           = "limit"
	// ParamFilter is GET PathQueues' name filter (QueuesOptions.Filter).
	ParamFilter = "filter"
	// ParamOffset is GET PathQueues' page offset (QueuesOptions.Offset).
	ParamOffset = "offset"
	// ParamQueues=false leaves the queue list out of GET PathSnapshot (the summary stays).
	ParamQueues = "queues"
)
