"""Jobs, schedules, sensors and the one Definitions object."""
