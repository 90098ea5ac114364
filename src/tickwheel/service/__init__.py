"""The timer service: the HTTP API (`api`, `routes`, `gate`) and the processes that run it with a
worker (`serve`, `process`)."""
