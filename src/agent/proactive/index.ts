/**
 * The proactive room: what the agent does without being asked. The heartbeat and its setup,
 * reminders, and the notifier timers both schedule. It stands on top of the other rooms and may use
 * any of them; none uses it.
 */
export {};
