"""gpuscope.cleanup"""
