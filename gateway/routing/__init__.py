"""Where a page goes: replica sets, the router (the one owner of routing state), fair work windows,
admission, retries across replicas and the page pipeline (pages -> encoder -> decoder -> outcomes).
"""
