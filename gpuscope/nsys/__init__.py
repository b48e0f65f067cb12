"""gpuscope.nsys"""
