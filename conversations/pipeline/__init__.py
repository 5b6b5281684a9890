"""The turn pipeline: lifecycle tasks run in order over a conversation's memory."""
