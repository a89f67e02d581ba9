/**
 * The proactive room: what the agent does without being asked. The heartbeat and its setup,
 * and reminders (with the notifier timers they set). It stands on top of the other rooms and may use
 * any of them; none uses it.
 */
export {};
